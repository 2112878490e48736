"""The flat engine (instances as rows, the step in numba kernels) against the reference and
the Python engine: generated flat subscriptions, restarts, subscription changes, batches."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers.cayuga import algebra as A
from matchers.cayuga.compiler import chains
from matchers.cayuga.engine import Engine
from matchers.cayuga.flat_rules import FLAT_PREFIX, flat_chain
from matchers.cayuga.language import parse

from .helpers import engine_matches, match_key, reference_matches, restarted_matches, same

BIG = 2**60 + 1  # an integer a float rounds (2**60): the static atoms are checked exactly
VALUES = [0, 1, 2, 1.0, True, False, "a", "b", None, math.nan, BIG, 2**60, -1.5]
# columns of one kind, built at once in batches of 16 events and more: floats, strings, key
# values looked up as they are (no booleans), and the mixed values
POOLS = [VALUES, [0.0, 1.0, 2.5, -1.5, -0.0, 2.0, math.nan], ["a", "b", "c"], [0, 1, 1.0, 2, "a", "b", None, math.nan, BIG]]
ATOMS = ["$2.y > 1", "$2.y <= 2.5", "$2.y = 1", "$2.y != 2", "$2.z = 'a'", "$2.z != 'b'", "$2.z = TRUE",
         f"$2.y = {BIG}", f"$2.y < {BIG}"]
STARTS = ["x > 0", "x = 1", "z = 'a'", "z != 'a' AND y >= 1", "x = TRUE", f"y = {BIG}", "y < 2"]
EQS = ["$2.x = $.x", "$2.y = $.x", "$2.z = $.z AND $2.x = $.x", "$2.x = $.x AND $2.y = $.y AND $2.z = $.z"]
EQS_NEXT = EQS + ["$2.x = $1.x", "$2.y = $1.z"]  # in NEXT, $1 is the instance's record (in FOLD, the first one)


@st.composite
def flat_subscriptions(draw):
    """A subscription the flat engine takes: a static start, NEXT/FOLD (one FOLD at most)
    with equalities and static atoms, DUR tests after each."""
    start = draw(st.sampled_from(["A", "B"]))
    if draw(st.booleans()):
        start = f"FILTER{{{draw(st.sampled_from(STARTS))}}}({start})"
    text, folds = start, 0
    for _ in range(draw(st.integers(1, 3))):
        fold = folds == 0 and draw(st.integers(0, 2)) == 0
        parts = draw(st.lists(st.sampled_from(ATOMS), min_size=0, max_size=2, unique=True))
        eq = draw(st.sampled_from([None, *(EQS if fold else EQS_NEXT)]))
        parts += [eq] if eq else []
        theta = " AND ".join(parts) or "TRUE"
        right = draw(st.sampled_from(["A", "B"]))
        if fold:
            folds = 1
            text = f"({text}) FOLD{{{theta}, TRUE}} {right}"
        else:
            text = f"({text}) NEXT{{{theta}}} {right}"
        if draw(st.booleans()):
            text = f"FILTER{{DUR {draw(st.sampled_from(['<=', '<', '>=', '=', '!=']))} {draw(st.integers(1, 6))}}}({text})"
    return text


@st.composite
def events_of(draw, n_max: int = 30, n_min: int = 0, pools: bool = False):
    """Events over attributes x, y, z; with ``pools``, each attribute's values from one of
    :data:`POOLS` (else from :data:`VALUES`)."""
    out, t = [], 0
    pool = {k: draw(st.sampled_from(POOLS)) if pools else VALUES for k in ("x", "y", "z")}
    for i in range(draw(st.integers(n_min, n_max))):
        t += draw(st.integers(0, 2))
        length = draw(st.sampled_from([0, 0, 0, 1]))
        attrs = {k: draw(st.sampled_from(pool[k])) for k in ("x", "y", "z")}
        for k in ("x", "y", "z"):
            if attrs[k] is None and draw(st.booleans()):
                del attrs[k]  # missing, not null
        out.append(A.Event(f"e{i}", draw(st.sampled_from(["A", "B"])), max(0, t - length), t, attrs))
    return out


def test_the_flat_subscriptions_are_those_without_records_to_compute():
    flat = ["FILTER{DUR <= 5}(FILTER{name = 'S' AND price > 1}(Stock) NEXT{$2.name = $1.name AND $2.price > 2} Stock)",
            "FILTER{name = 'S'}(Stock) FOLD{$2.name = $.name AND $2.price > 2, TRUE} Stock",
            "Stock NEXT{TRUE} Stock", "(A NEXT{$2.k = $1.k} B) FOLD{$2.k = $.k, TRUE} A"]
    not_flat = ["SELECT name FROM (Stock NEXT{TRUE} Stock)",  # a projection
                "Stock NEXT{$2.price > $1.price} Stock",  # a range over the instance's record
                "Stock FOLD{TRUE, $2.price > $.price} Stock",  # an iteration condition
                "Stock FOLD{$2.k = $1.k, TRUE} Stock",  # the FOLD's first record ($1)
                "(A FOLD{TRUE, TRUE} A) FOLD{TRUE, TRUE} A",  # two FOLDs: one witness, two derivations
                "Stock UNLESS{TRUE, 5} Stock",
                "FILTER{name < 'S'}(Stock) NEXT{TRUE} Stock",  # a string range
                "FILTER{contains(name, 'S')}(Stock) NEXT{TRUE} Stock",
                "Stock NEXT{$2.a = $1.a AND $2.b = $1.b AND $2.c = $1.c AND $2.d = $1.d} Stock"]  # 4 equalities
    assert all(flat_chain(c) for t in flat for c in chains(parse(t)))
    assert not any(all(flat_chain(c) for c in chains(parse(t))) for t in not_flat)
    eng = Engine(flat=True)
    for i, t in enumerate(flat + not_flat):
        eng.add(f"q{i}", t)
    assert set(eng.flat._subs) == {f"q{i}" for i in range(len(flat))}
    assert len(eng) == len(flat) + len(not_flat) and all(f"q{i}" in eng for i in range(len(flat + not_flat)))
    for i in range(len(flat + not_flat)):
        assert eng.remove(f"q{i}")
    assert not eng.flat.nodes and not eng.flat.starts and not eng.nodes and len(eng) == 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(subs=st.lists(flat_subscriptions(), min_size=1, max_size=4), events=events_of(),
       after=st.none() | st.integers(0, 6))
def test_flat_engine_equals_reference(subs, events, after):
    named = {f"q{i}": text for i, text in enumerate(subs)}
    until = None if after is None else (events[-1].t1 if events else 0) + after
    expected = same(reference_matches(named, events, until))
    assert same(engine_matches(named, events, until, flat=True)) == expected
    assert same(engine_matches(named, events, until, merge=False, flat=True)) == expected
    assert same(engine_matches(named, events, until)) == expected
    probe = Engine(flat=True)
    for k, text in named.items():
        probe.add(k, text)
    assert set(probe.flat._subs) == set(named)  # every generated subscription ran flat


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(subs=st.lists(flat_subscriptions(), min_size=1, max_size=3), events=events_of(), cut=st.integers(0, 30))
def test_flat_state_survives_a_restart(subs, events, cut):
    """Instances exported as rows (through JSON) and loaded into a new engine go on as before."""
    named = {f"q{i}": text for i, text in enumerate(subs)}
    assert same(restarted_matches(named, events, cut, flat=True)) == same(reference_matches(named, events))


def _run(eng: Engine, events, batch: int) -> list[tuple]:
    out = []
    for i in range(0, len(events), batch):
        out += [match_key(i + pos, m) for pos, m in eng.process_batch(events[i:i + batch])]
    return sorted(out, key=repr)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(subs=st.lists(flat_subscriptions(), min_size=2, max_size=4), events=events_of(60),
       data=st.data())
def test_subscription_changes_and_batches_agree_with_the_python_engine(subs, events, data):
    """Subscriptions removed, re-added and replaced mid-stream, events in batches of any size:
    the flat engine reports what the Python engine reports, and drops what it drops."""
    flat, py = Engine(flat=True), Engine()
    ops = data.draw(st.lists(st.tuples(st.integers(0, len(events)), st.integers(0, len(subs) - 1),
                                       st.sampled_from(["remove", "add", "replace"])), max_size=4))
    for eng in (flat, py):
        for i, text in enumerate(subs):
            eng.add(f"q{i}", text)
    batch = data.draw(st.integers(1, 7))
    got: dict[str, list] = {"flat": [], "py": []}
    pos = 0
    for at, k, what in sorted(ops) + [(len(events), 0, "end")]:
        for name, eng in (("flat", flat), ("py", py)):
            got[name] += [(pos + m[0], *m[1:]) for m in _run(eng, events[pos:at], batch)]
            if what == "remove":
                eng.remove(f"q{k}")
            elif what == "add":
                eng.add(f"q{k}", subs[k])
            elif what == "replace":
                eng.add(f"q{k}", subs[(k + 1) % len(subs)])
        pos = max(pos, at)
        assert flat.instances == py.instances
        assert flat.next_expiry() == py.next_expiry()
    assert same(sorted(got["flat"], key=repr)) == same(sorted(got["py"], key=repr))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(subs=st.lists(flat_subscriptions(), min_size=1, max_size=4), events=events_of(60, 16, pools=True),
       batch=st.integers(16, 60))
def test_batches_of_columns_of_one_kind_equal_the_reference(subs, events, batch):
    """Batches of 16 events and more, where a column of one kind of value is built at once."""
    named = {f"q{i}": text for i, text in enumerate(subs)}
    eng = Engine(flat=True)
    for k, text in named.items():
        eng.add(k, text)
    assert same(_run(eng, events, batch)) == same(reference_matches(named, events))


def test_a_publication_moves_the_flat_readers_with_their_instances():
    """A subscription publishing stream B makes the flat subscriptions reading B run in the
    Python engine (published records are fed there), their instances moved: the same
    matches as an engine without a flat part."""
    events = [A.Event(f"e{i}", "A", i, i, {"x": i % 2, "y": i}) for i in range(12)]
    named = {"reader": "FILTER{x = 1}(A) NEXT{$2.x = $1.x} B", "a": "A NEXT{$2.x = $1.x} A"}
    outs = []
    for flat in (True, False):
        eng = Engine(flat=flat)
        for k, text in named.items():
            eng.add(k, text, since=0)
        out = [match_key(i, m) for i, e in enumerate(events[:5]) for m in eng.process(e)]
        if flat:
            assert set(eng.flat._subs) == {"reader", "a"}
        held = eng.instances
        eng.add("pub", "SELECT x, y FROM FILTER{y > 2}(A) PUBLISH B", since=0)
        if flat:
            assert set(eng.flat._subs) == {"a"} and "reader" in eng._subs and eng.instances == held
        out += [match_key(5 + i, m) for i, e in enumerate(events[5:]) for m in eng.process(e)]
        outs.append(same(sorted(out, key=repr)))
    assert outs[0] == outs[1] and any("'reader'" in k for k in outs[0])


def test_an_older_engine_s_state_loads_into_the_flat_nodes():
    """Rows of an engine without a flat part (plain node ids) go to the flat nodes; the flat
    engine's own rows carry its prefix and go back to it alone."""
    text = "FILTER{DUR <= 9}(FILTER{x > 0}(A) NEXT{$2.x = $1.x} A)"
    events = [A.Event(f"e{i}", "A", i, i, {"x": i % 3}) for i in range(10)]
    old = Engine(flat=False)
    old.add("q", text, since=0)
    first = [match_key(i, m) for i, e in enumerate(events[:5]) for m in old.process(e)]
    rows = json.loads(json.dumps(old.export_instances()))
    assert rows and not any(r[0].startswith(FLAT_PREFIX) for r in rows)
    new = Engine(flat=True)
    new.add("q", text, since=0)
    assert new.load_instances(rows, old.clock) == len(rows) and new.flat.instances == len(rows)
    exported = new.export_instances()
    assert all(r[0].startswith(FLAT_PREFIX) for r in exported)
    again = Engine(flat=True)
    again.add("q", text, since=0)
    again.load_instances(json.loads(json.dumps(exported)), new.clock)
    rest = [match_key(5 + i, m) for i, e in enumerate(events[5:]) for m in again.process(e)]
    assert same(sorted(first + rest, key=repr)) == same(reference_matches({"q": text}, events))


def test_events_out_of_order_in_a_batch_are_refused_after_the_earlier_ones():
    eng = Engine(flat=True)
    eng.add("q", "FILTER{x = 1}(A) NEXT{$2.x = $1.x} A")
    events = [A.Event("e0", "A", 5, 5, {"x": 1}), A.Event("e1", "A", 6, 6, {"x": 1}), A.Event("e2", "A", 2, 2, {"x": 1})]
    with pytest.raises(ValueError, match="before the previous event"):
        eng.process_batch(events)
    assert eng.clock == 6 and eng.instances == 1  # e0 and e1 were processed


def test_an_attribute_read_first_by_a_later_subscription_is_read_from_the_live_records():
    """A subscription whose equality reads an attribute no earlier one read (a new key
    slot) shares a node whose records were made before: their values for it are taken from
    the records, as the Python engine reads them."""
    events = [A.Event(f"e{i}", "A", i, i, {"x": i % 3, "z": ["p", "q"][i % 2], "y": i}) for i in range(40)]
    first = "FILTER{y >= 0}(A) NEXT{$2.x = $1.x} A"
    later = ["(FILTER{y >= 0}(A) NEXT{$2.x = $1.x} A) NEXT{$2.z = $.z} A", "A FOLD{$2.z = $.z AND $2.x = $.x, TRUE} A"]
    outs = []
    for flat in (True, False):
        eng = Engine(flat=flat)
        eng.add("first", first)
        out = [match_key(i, m) for i, e in enumerate(events[:10]) for m in eng.process(e)]
        for k, text in enumerate(later):
            eng.add(f"later{k}", text)
            out += [match_key(10 + 10 * k + i, m) for i, e in enumerate(events[10 + 10 * k:20 + 10 * k])
                    for m in eng.process(e)]
        out += [match_key(30 + i, m) for i, e in enumerate(events[30:]) for m in eng.process(e)]
        if flat:
            assert set(eng.flat._subs) == {"first", "later0", "later1"}
        outs.append(same(sorted(out, key=repr)))
    assert outs[0] == outs[1] and any("'later0'" in k for k in outs[0])

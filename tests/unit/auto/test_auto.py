"""The ``auto`` matcher: the index it picks follows the workload's shape and its events, it
re-decides on drift (of the subscriptions or of the events, with hysteresis), and it stays
equal to the oracle through rebuilds, key reuse and pickling."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers import auto
from matchers.auto import CHOICES, DRIFT, AutoMatcher, Events, Shape, choose
from matchers.catalog import create
from matchers.expr import Subscription
from matchers.language import parse_record
from matchers.subtable import SubscriptionTable
from scripts.rules import eventbridge, make_rules
from scripts.workloads import generate, opindex
from tests.differential import check, subscriptions_of
from tests.strategies import exprs, extended_exprs


@pytest.mark.parametrize(("workload", "index"), [
    ("dense", "bitmark"),
    ("fabret-w2", "static"),
    ("fabret-w0", "static"),
    ("fabret-w3", "propagation"),
    ("fabret-w6", "propagation"),
    ("amkh", "propagation"),
    ("opindex", "opindex"),
    ("stock", "static"),
    ("ecommerce", "counting"),
    ("vci", "vci"),
])
def test_choice_follows_the_shape(workload, index):
    wl = generate(workload, n_subs=2000, n_events=30, seed=1)
    matcher = create("auto")
    matcher.add(wl.subscriptions)
    assert matcher.choice == index and index in CHOICES
    described = matcher.describe()
    assert described["matcher"] == index and described["reason"]
    assert described["shape"]["subscriptions"] == 2000
    check(matcher, wl.subscriptions, wl.events[:30])


def test_large_spread_equality_sets_get_dynamic(monkeypatch):
    monkeypatch.setattr("matchers.auto.DYNAMIC_FROM", 1500)
    for workload, index in (("fabret-w3", "dynamic"), ("fabret-w6", "propagation")):
        wl = generate(workload, n_subs=2000, n_events=20, seed=1)
        matcher = create("auto")
        matcher.add(wl.subscriptions)
        assert matcher.choice == index
        check(matcher, wl.subscriptions, wl.events)


def test_rules_with_patterns_and_presence_tests_get_counting(monkeypatch):
    """EventBridge-like rules (OR-lists, prefixes, ``exists``, ``anything-but``): equality-heavy
    with spread values, but the clustering indexes leave too much to check one by one
    (issue 31: propagation was 1.3-1.8x counting's time at 1,000 to 100,000 rules)."""
    monkeypatch.setattr("matchers.auto.DYNAMIC_FROM", 1500)
    wl = eventbridge(n_subs=2000, n_events=20, seed=1)
    matcher = create("auto")
    matcher.add(wl.subscriptions)
    assert matcher.choice == "counting"
    shape = matcher.describe()["shape"]
    assert shape["equalities"] >= 0.5 and shape["residual"] >= auto.PLAIN and shape["patterns"] >= auto.PLAIN
    check(matcher, wl.subscriptions, wl.events)


@pytest.mark.parametrize("n_subs", [1_000, 10_000])
def test_rules_workload_gets_counting_at_every_size(n_subs):
    """The shape of the rules of ``scripts.bench.auto``'s ``eventbridge`` workload at the sizes
    of its benchmark (docs/auto.md) gives counting, the fastest there."""
    tally = auto._Tally()
    tally.update(eventbridge(n_subs=n_subs, n_events=1, seed=0).subscriptions, +1)
    shape = tally.shape()
    assert shape.subscriptions == n_subs
    assert choose(shape)[0] == "counting"
    assert choose(shape, Events(1000, 12, 0.5, 1.2, 40))[0] == "counting"


def test_rules_without_presence_tests_get_counting():
    """The rules without ``anything-but`` and ``exists`` (``native_only``) still get counting,
    from their prefixes and case-folded tests alone (fastest there too, docs/auto.md)."""
    tally = auto._Tally()
    tally.update([parse_record(dict(r)) for r in make_rules(1_000, 0, native_only=True)], +1)
    shape = tally.shape()
    assert shape.residual == 0 and shape.patterns >= auto.PLAIN
    assert choose(shape)[0] == "counting"


def test_rules_shape_at_100000_gets_counting():
    """The rules' shape at 100,000 (counted from ``eventbridge(100_000, ...)``, too slow to
    build here) is past :data:`DYNAMIC_FROM` yet gets counting: the prefixes (23%) and
    presence tests (26%) keep it from the clustering indexes; without the patterns and the
    presence tests the same shape would get ``dynamic``."""
    shape = Shape(subscriptions=100_000, conjunctions=100_000, predicates=226_114, attributes=10,
                  per_conjunction=2.261, ranges=0.0, equalities=0.581, patterns=0.233, residual=0.261,
                  shared_pair=0.026, value_skew=0.169)
    assert shape.subscriptions >= auto.DYNAMIC_FROM
    assert choose(shape)[0] == "counting"
    assert choose(shape, Events(1000, 12, 0.5, 1.2, 4472))[0] == "counting"
    assert choose(replace(shape, patterns=0.0, residual=0.0))[0] == "dynamic"


def test_drift_redecides_and_stays_exact():
    dense = generate("dense", n_subs=400, n_events=20, seed=2)
    fabret = generate("fabret-w0", n_subs=2000, n_events=20, seed=2)
    eq_subs = [Subscription(f"e{s.id}", s.expr, s.conjunctions) for s in fabret.subscriptions]
    events = dense.events + fabret.events
    matcher = create("auto")
    matcher.add(dense.subscriptions)
    assert matcher.choice == "bitmark"
    # fewer changes than the drift threshold: the choice stays until the threshold is passed
    few = int(DRIFT * 400) - 10
    matcher.add(eq_subs[:few])
    check(matcher, dense.subscriptions + eq_subs[:few], events)
    assert matcher.choice == "bitmark"
    matcher.add(eq_subs[few:])
    live = dense.subscriptions + eq_subs
    check(matcher, live, events)  # the match re-decides
    assert matcher.choice == "static"
    # removing the equality subscriptions drifts back
    matcher.remove(s.id for s in eq_subs)
    check(matcher, dense.subscriptions, events)
    assert matcher.choice == "bitmark"


def test_reused_keys_keep_matches_sorted():
    wl = generate("fabret-w0", n_subs=600, n_events=40, seed=3)
    subs = wl.subscriptions
    matcher = create("auto")
    matcher.add(subs)
    matcher.remove(s.id for s in subs[:100:3])
    back = [Subscription(f"x{s.id}", s.expr, s.conjunctions) for s in subs[:100:3]]
    matcher.add(back)  # the inner index hands out keys in its own order
    live = [s for s in subs if s not in subs[:100:3]] + back
    check(matcher, live, wl.events)


def test_pickled_matcher_matches_and_changes():
    wl = generate("dense", n_subs=500, n_events=20, seed=4)
    matcher = create("auto")
    matcher.add(wl.subscriptions[:400])
    copy = pickle.loads(pickle.dumps(matcher, protocol=5))
    assert isinstance(copy, AutoMatcher) and copy.choice == matcher.choice
    check(copy, wl.subscriptions[:400], wl.events)
    copy.add(wl.subscriptions[400:])
    copy.remove(s.id for s in wl.subscriptions[:50])
    check(copy, wl.subscriptions[50:], wl.events)


def test_failed_insert_leaves_the_shape_unchanged():
    matcher = create("auto")
    wl = generate("fabret-w0", n_subs=50, n_events=5, seed=5)
    matcher.add(wl.subscriptions)
    before = matcher.describe()
    inner = matcher._inner
    inner_add = inner.add

    def failing(subs):
        raise MemoryError("full")

    inner.add = failing
    with pytest.raises(MemoryError):
        matcher.add([Subscription(f"y{s.id}", s.expr, s.conjunctions) for s in wl.subscriptions[:5]])
    inner.add = inner_add
    assert matcher.describe() == before
    check(matcher, wl.subscriptions, wl.events)


@pytest.mark.parametrize(("k", "index"), [(2, "counting"), (3, "bitmark")])
def test_dense_variants_by_predicates_per_subscription(k, index):
    wl = generate("dense", n_subs=500, n_events=20, k=k, seed=6)
    matcher = create("auto")
    matcher.add(wl.subscriptions)
    assert matcher.choice == index
    check(matcher, wl.subscriptions, wl.events)


def test_shared_index_round_trip_then_changes(tmp_path, monkeypatch):
    from streaming import shared_index

    monkeypatch.setattr(shared_index, "directory", lambda: tmp_path)
    wl = generate("fabret-w0", n_subs=300, n_events=20, seed=7)
    matcher = create("auto")
    matcher.add(wl.subscriptions[:250])
    key = shared_index.SharedKey("app-auto-test", str(tmp_path / "registry"), "auto")
    loaded = shared_index.load(shared_index.publish(matcher, key, 1))
    check(loaded, wl.subscriptions[:250], wl.events)
    loaded.remove(s.id for s in wl.subscriptions[:30])
    loaded.add(wl.subscriptions[250:])
    check(loaded, wl.subscriptions[30:], wl.events)


D = 8
_ATTRS = [f"a{i}" for i in range(D)]


def _ranges(n: int, d: int, seed: int) -> list[Subscription]:
    """Conjunctions of 1 to 4 numeric ranges over ``d`` attributes (OpIndex Table 3, ``theta1=0``)."""
    return opindex(n_subs=n, n_events=1, d=d, m=1, theta1=0.0, seed=seed).subscriptions


def _events(coverage: float) -> Events:
    return Events(events=1000.0, attributes=20 * coverage, coverage=coverage, rows=1.0, matches=10.0)


def test_events_decide_between_counting_and_bitmark():
    matcher = create("auto")
    matcher.add(_ranges(2000, 20, seed=8))
    assert matcher.choice == "counting" and matcher.describe()["events"] is None  # no events yet: the shape's rule
    shape = Shape(**matcher.describe()["shape"])
    assert choose(shape, None)[0] == "counting"
    assert choose(shape, _events(0.05))[0] == "counting"  # 1 of 20 attributes per event
    index, reason = choose(shape, _events(1.0))
    assert index == "bitmark" and "carrying 100%" in reason
    wide = Shape(**{**shape.__dict__, "attributes": 200})
    assert choose(wide, _events(1.0))[0] == "counting"  # marking 200 attributes costs more


def test_intervals_on_attributes_the_events_carry_get_bitmark(monkeypatch):
    """One range per conjunction (VCI's workload): ``vci`` on the shape alone, ``bitmark`` once
    the events carry the attribute (VCI 5.2 at 100,000: bitmark 61 us/event, vci 85)."""
    monkeypatch.setattr(auto, "MIN_EVENTS", 40)
    wl = generate("vci", n_subs=2000, n_events=100, seed=4)
    matcher = create("auto")
    matcher.add(wl.subscriptions)
    assert matcher.choice == "vci"
    for lo in range(0, 100, 20):
        check(matcher, wl.subscriptions, wl.events[lo:lo + 20])
    assert matcher.choice == "bitmark" and matcher.describe()["events"]["coverage"] == 1.0


def test_dense_events_switch_to_bitmark_and_back(monkeypatch):
    monkeypatch.setattr(auto, "MIN_EVENTS", 40)
    monkeypatch.setattr(auto, "HALF_LIFE", 40)
    subs = _ranges(600, 20, seed=9)
    dense = opindex(n_subs=1, n_events=120, d=20, theta1=0.0, m=20, seed=9).events
    sparse = opindex(n_subs=1, n_events=120, d=20, theta1=0.0, m=1, seed=9).events
    matcher = create("auto")
    matcher.add(subs)
    choices = []
    for events in (dense, sparse):
        for lo in range(0, len(events), 20):
            check(matcher, subs, events[lo:lo + 20])
            choices.append(matcher.choice)
    described = matcher.describe()
    assert choices[0] == "counting" and "bitmark" in choices and choices[-1] == "counting"
    # decided on events carrying under a quarter of the 20 attributes (20 / COVERED_ATTRIBUTES)
    assert described["matcher"] == "counting" and described["events"]["coverage"] < 0.25


def _event_batches(lo: int, hi: int) -> st.SearchStrategy:
    """Batches of events each carrying ``lo`` to ``hi`` of the attributes (values around the
    operands, now and then of another kind), sometimes one no subscription names."""
    value = st.one_of(st.integers(0, 52), st.floats(0, 52, allow_nan=False), st.sampled_from(["x", True, None]))
    names = st.lists(st.sampled_from(_ATTRS), min_size=lo, max_size=hi, unique=True)
    event = names.flatmap(lambda ns: st.fixed_dictionaries({n: value for n in ns}))
    extra = st.dictionaries(st.sampled_from(["z", "w"]), st.integers(0, 9), max_size=1)
    return st.lists(st.builds(lambda e, x: {**e, **x}, event, extra), min_size=4, max_size=8)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 3),
       phases=st.tuples(st.lists(_event_batches(0, 1), min_size=6, max_size=8),
                        st.lists(_event_batches(7, D), min_size=8, max_size=10),
                        st.lists(_event_batches(0, 1), min_size=8, max_size=10)))
def test_drifting_events_match_as_the_oracle(seed, phases):
    """Sparse, then dense, then sparse events: every batch equals the oracle's, across the
    rebuilds the drift causes (bitmark from events carrying half the attributes)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(auto, "MIN_EVENTS", 12)
        mp.setattr(auto, "HALF_LIFE", 8)
        mp.setattr(auto, "COVERED_ATTRIBUTES", 2 * D)
        subs = _ranges(150, D, seed)
        matcher = create("auto")
        matcher.add(subs)
        seen = []
        for phase in phases:
            for batch in phase:
                check(matcher, subs, batch)
                seen.append(matcher.choice)
        assert seen[0] == "counting" and "bitmark" in seen and seen[-1] == "counting"


def test_noise_around_the_threshold_does_not_flip(monkeypatch):
    """Batches alternately below and above the coverage threshold: the events are decided on
    once, and the choice never flaps."""
    monkeypatch.setattr(auto, "MIN_EVENTS", 10)
    monkeypatch.setattr(auto, "HALF_LIFE", 10)
    monkeypatch.setattr(auto, "COVERED_ATTRIBUTES", 2 * D)  # bitmark from half the attributes
    decisions = []
    redecide = AutoMatcher._redecide
    monkeypatch.setattr(AutoMatcher, "_redecide", lambda self: (decisions.append(1), redecide(self))[1])
    subs = _ranges(200, D, seed=4)
    matcher = create("auto")
    matcher.add(subs)  # decision 1, on the shape
    choices = set()
    for i in range(40):
        k = 3 if i % 2 else 5
        check(matcher, subs, [{a: 20 + j for j, a in enumerate(_ATTRS[:k])}] * 8)
        choices.add(matcher.choice)
    assert len(decisions) == 2 and len(choices) == 1  # decision 2, on the first events


def _counted(subs: list[Subscription]) -> dict:
    """The tally's counts of ``subs`` counted directly (the reference for :class:`auto._Tally`)."""
    from collections import Counter

    from matchers.expr import INDEXED_OPS, ORDER_OPS, STRING_OPS, Kind, Op

    c: dict = dict(subs=len(subs), conjs=0, preds=0, ranges=0, equalities=0, patterns=0, residual=0,
                   attrs=Counter(), pairs=Counter(), eq_attrs=Counter(), eq_values=Counter())
    for sub in subs:
        preds = [p for conj in sub.conjunctions for p in conj]
        c["conjs"] += len(sub.conjunctions)
        c["preds"] += len(preds)
        c["residual"] += any(p.op not in INDEXED_OPS for p in preds)
        c["ranges"] += sum(p.op in ORDER_OPS | {Op.BETWEEN} and p.kind is Kind.NUM for p in preds)
        c["equalities"] += sum(p.op in (Op.EQ, Op.IN) for p in preds)
        c["patterns"] += sum(p.op in STRING_OPS - {Op.EQ_ICASE, Op.IN_ICASE} for p in preds)
        c["attrs"].update(p.attr for p in preds)
        c["eq_attrs"].update(p.attr for p in preds if p.op is Op.EQ)
        c["eq_values"].update((p.attr, p.operand) for p in preds if p.op is Op.EQ)
        for conj in sub.conjunctions:
            eq = sorted(p.attr for p in conj if p.op is Op.EQ)[:auto.MAX_PAIRED]
            c["pairs"].update((a, b) for i, a in enumerate(eq) for b in eq[i + 1:])
    return c


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**16), st.integers(1, 8))
def test_the_tally_after_adds_and_removals_counts_the_live_set(seed, steps):
    """Counts kept up to date through adds and removals in batches are the live set's, without
    the counts that fell to zero."""
    import random

    from tests.strategies import random_subscriptions

    rng = random.Random(seed)
    pool = random_subscriptions(rng, 30 * steps, extended=True)
    tally, live = auto._Tally(), {}
    for step in range(steps):
        batch = pool[step * 30:(step + 1) * 30]
        tally.update(batch, +1)
        live.update((s.id, s) for s in batch)
        gone = rng.sample(sorted(live), rng.randrange(len(live) + 1))
        tally.update([live.pop(i) for i in gone], -1)
        assert {k: getattr(tally, k) for k in _counted([])} == _counted(list(live.values())), (seed, step)
        assert all(n > 0 for counts in (tally.attrs, tally.pairs, tally.eq_attrs, tally.eq_values)
                   for n in counts.values())  # Counter's == takes a missing count for 0: not so here


def _counted_one_by_one(subs: list[Subscription]) -> dict:
    """The tally's counts of ``subs``, each predicate looked at where it occurs (the model)."""
    from collections import Counter
    from itertools import combinations

    conjs = [c for s in subs for c in s.conjunctions]
    preds = [p for c in conjs for p in c]
    classes = Counter(auto._CLASS[p.op][p.kind] for p in preds)
    eq = [p for p in preds if p.op is auto.Op.EQ]
    pairs = Counter(pair for c in conjs for pair in combinations(
        sorted(p.attr for p in c if p.op is auto.Op.EQ)[:auto.MAX_PAIRED], 2))
    return dict(subs=len(subs), conjs=len(conjs), preds=len(preds), ranges=classes[auto._RANGE],
                equalities=classes[auto._EQ] + classes[auto._IN], patterns=classes[auto._PATTERN],
                residual=sum(any(auto._OUTSIDE[p.op] for c in s.conjunctions for p in c) for s in subs),
                attrs=Counter(p.attr for p in preds), pairs=pairs, eq_attrs=Counter(p.attr for p in eq),
                eq_values=Counter((p.attr, p.operand) for p in eq))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), shared=st.booleans())
def test_tally_in_bulk_counts_what_each_predicate_adds(seed, shared):
    """The tally counts each predicate object once with its occurrences: in bulk, with the
    predicates one object each (as a shard's bulk read makes them) or not, and after removals,
    it holds the counts of the predicates one by one."""
    import random

    from matchers.packed import pack, unpack
    from tests.strategies import random_subscriptions

    subs = random_subscriptions(random.Random(seed), 60, extended=True)
    if shared:
        cache: dict = {}
        subs = [unpack(pack(s), s.id, cache) for s in subs]
    tally = auto._Tally()
    tally.update(subs, +1)
    tally.update(subs[::3], -1)
    left = [s for i, s in enumerate(subs) if i % 3]
    want = _counted_one_by_one(left)
    got = {k: getattr(tally, k) for k in want}
    assert {k: +v if hasattr(v, "items") else v for k, v in got.items()} == want


def _tallies(subs: list[Subscription]) -> tuple[dict, dict]:
    """The tally of ``subs`` counted from their objects and from their packed rows' columns
    (:meth:`auto._Tally.update_columns`; the rows ``decode`` skips, from their objects)."""
    from matchers.packed import decode

    table = SubscriptionTable.pack(subs)
    rows = decode(table.sub_offsets, table.sub_bytes)
    objects, columns = auto._Tally(), auto._Tally()
    objects.update(subs, +1)
    columns.update_columns(rows, +1)
    columns.update([subs[i] for i in rows.skipped.tolist()], +1)
    return ({k: getattr(objects, k) for k in _counted([])}, {k: getattr(columns, k) for k in _counted([])})


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), extended=st.booleans(), n=st.integers(1, 120))
def test_tally_from_packed_columns_counts_what_objects_count(seed, extended, n):
    """Counted from a shard's packed rows (no object per subscription), the tally, the shape and
    the choice are those of the subscriptions as objects, then counted out again by objects."""
    import random

    from tests.strategies import random_subscriptions

    subs = random_subscriptions(random.Random(seed), n, extended=extended)
    objects, columns = _tallies(subs)
    assert columns == objects
    assert all(v > 0 for c in columns.values() if hasattr(c, "values") for v in c.values())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees=st.lists(exprs | extended_exprs, min_size=1, max_size=14))
def test_tally_from_columns_of_generated_trees(trees):
    subs = subscriptions_of(trees)
    if subs:
        objects, columns = _tallies(subs)
        assert columns == objects


COLUMNAR = ("static", "dynamic", "propagation", "counting")
"""The indexes taking packed rows as columns (Matcher._insert_columns)."""


@pytest.mark.parametrize("workload", ["dense", "fabret-w0", "fabret-w1", "fabret-w2", "fabret-w3", "fabret-w6",
                                      "amkh", "opindex", "stock", "ecommerce", "vci"])
def test_the_choice_from_packed_rows_is_the_choice_from_objects(workload):
    """add_packed decides as add on every workload, counting the rows' columns; the inner
    matcher takes the rows (its table is the shard's, for an index taking columns), and both
    match as the oracle."""
    wl = generate(workload, n_subs=2000, n_events=30, seed=1)
    plain, packed = create("auto"), create("auto")
    plain.add(wl.subscriptions)
    table = SubscriptionTable.pack(wl.subscriptions)
    packed.add_packed(table)
    assert packed.describe() == plain.describe()
    assert {k: getattr(packed._tally, k) for k in _counted([])} == {k: getattr(plain._tally, k) for k in _counted([])}
    if packed.choice in COLUMNAR:
        assert packed._inner._subs is table
    check(packed, wl.subscriptions, wl.events[:30])
    check(plain, wl.subscriptions, wl.events[:30])


def test_packed_rows_replacing_and_growing_a_set_keep_the_tally_and_redecide():
    """Rows added to a non-empty set count the replaced subscriptions out (their objects) and the
    rows in (columns); a table repeating an id goes to add; drift redecides as after add."""
    import random

    from tests.strategies import random_event, random_subscriptions

    rng = random.Random(11)
    subs = random_subscriptions(rng, 300, extended=True)
    evs = [random_event(rng, True) for _ in range(40)]
    m = create("auto")
    m.add_packed(SubscriptionTable.pack(subs[:100]))
    live = {s.id: s for s in subs[:100]}
    change = [Subscription.of(s.id, t.expr) for s, t in zip(subs[:30], subs[100:130], strict=True)] + subs[130:250]
    m.add_packed(SubscriptionTable.pack(change))
    live.update((s.id, s) for s in change)
    again = [subs[0], Subscription.of(subs[0].id, subs[299].expr)]
    m.add_packed(SubscriptionTable.pack(again))
    live[subs[0].id] = again[-1]
    assert {k: getattr(m._tally, k) for k in _counted([])} == _counted(list(live.values()))
    check(m, list(live.values()), evs)
    assert m.describe()["shape"]["subscriptions"] == len(live)  # the drift (150%) redecided on the first match


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_removes_and_replaces_counted_out_from_packed_rows_keep_the_tally(seed):
    """Removes and replaces of subscriptions held as packed rows (counted out of the tally from
    their rows' columns) or as objects (added by add), interleaved: the tally is the live set's
    and the matches the oracle's."""
    import random

    from tests.strategies import random_event, random_subscriptions

    rng = random.Random(seed)
    subs = random_subscriptions(rng, 400, extended=True)
    evs = [random_event(rng, True) for _ in range(40)]
    m = create("auto")
    m.add_packed(SubscriptionTable.pack(subs[:150]))
    live = {s.id: s for s in subs[:150]}
    for step in range(6):
        gone = rng.sample(sorted(live), rng.choice([1, 10, 40]))
        assert m.remove(gone + ["never-added"]) == len(gone)
        for i in gone:
            del live[i]
        assert {k: getattr(m._tally, k) for k in _counted([])} == _counted(list(live.values())), step
        fresh = subs[150 + 40 * step:170 + 40 * step]
        change = [Subscription.of(i, s.expr) for i, s in zip(rng.sample(sorted(live), 10), fresh, strict=False)] \
            + subs[170 + 40 * step:190 + 40 * step]
        m.add(change) if step % 2 else m.add_packed(SubscriptionTable.pack(change))
        live.update((s.id, s) for s in change)
        assert {k: getattr(m._tally, k) for k in _counted([])} == _counted(list(live.values())), step
        check(m, list(live.values()), evs)


def test_unreadable_packed_rows_change_neither_the_set_nor_the_shape():
    import random

    import numpy as np

    from matchers.packed import pack
    from tests.strategies import random_event, random_subscriptions

    rng = random.Random(7)
    subs = random_subscriptions(rng, 10)
    m = create("auto")
    m.add_packed(SubscriptionTable.pack(subs[:5]))
    counts = {k: getattr(m._tally, k) for k in _counted([])}
    good = SubscriptionTable.pack(subs[5:])
    for bad in (b"not packed", b"", pack(subs[0])[:-3], b"(\x01\x00\x00\x00i\x01\x00\x00\x00"):
        blobs = [pack(subs[5]), bad]
        offsets = np.concatenate([[0], np.cumsum([len(b) for b in blobs])]).astype(np.int64)
        table = SubscriptionTable(good.id_offsets[:3], good.id_bytes[:int(good.id_offsets[2])], offsets,
                                  np.frombuffer(b"".join(blobs), dtype=np.uint8))
        with pytest.raises((ValueError, EOFError, TypeError, IndexError)):
            m.add_packed(table)
        assert len(m) == 5 and {k: getattr(m._tally, k) for k in _counted([])} == counts
    check(m, subs[:5], [random_event(rng) for _ in range(30)])

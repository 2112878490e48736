"""bitmark's wide mode (:mod:`matchers.bitmark.wide`) against the oracle: widths 0.3 to 0.95,
mixed widths, bounds on bucket edges, open and closed bounds, missing attributes, residual
predicates, many tiles, inserts and deletes after a build, and the automatic choice."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers.bitmark import BitMarkMatcher
from matchers.bitmark.layout import Intervals
from matchers.catalog import create
from matchers.expr import And, Or, Subscription, pred
from scripts.workloads import dense
from tests.differential import check, insert_delete, subscriptions_of
from tests.strategies import events, exprs, random_event, random_subscriptions
from tests.unit.bitmark.test_bitmark import (
    check_split_upserts,
    check_updates_after_build,
    wide_workload,
)


def wide(tile: int = 2, tail_min: int = 64, mode: bool | None = True) -> BitMarkMatcher:
    """A bitmark matcher in the wide mode (``mode``) over tiles of ``tile`` words."""
    matcher = create("bitmark", wide=mode)
    assert isinstance(matcher, BitMarkMatcher)
    matcher.wide_tile = tile
    matcher.tail_min = tail_min
    return matcher


@pytest.mark.parametrize("seed, width", [(1, 0.3), (2, 0.7), (3, 0.7), (4, 0.95)])
def test_dense_sequences_with_residuals_and_missing_values_match_oracle(seed, width):
    """Dense intervals with random subscriptions (residual predicates, strings, booleans) and
    events lacking attributes or holding non-numbers mixed in; inserts and deletes between
    matches, rebuilds."""
    rng = random.Random(seed)
    work = dense(n_subs=3000, n_events=60, d=6, k=3, width=width, seed=seed)
    pool = work.subscriptions + random_subscriptions(rng, 300, prefix="r")
    evs = work.events[:40] + [random_event(rng) for _ in range(20)]
    for e in evs[:40:3]:
        e.update(random_event(rng))
    for e in evs[1:40:5]:
        e.pop("a1")
    matcher = wide(tile=2)
    live = insert_delete(matcher, pool, evs, rng, steps=4, batch=900, gone=lambda step, _: 150 + 100 * step)
    assert len(matcher) == len(live)
    assert matcher._wide and matcher._tile == 2


def test_many_ends_per_bucket_and_equal_values():
    """Thousands of slots in one tile, so that a bucket holds many ends (the running bitsets and
    the one-by-one marking of the low ends both run), and many events with equal values."""
    work = dense(n_subs=6000, n_events=200, d=3, k=2, width=0.7, seed=7)
    evs = work.events[:120] + [dict(work.events[0]) for _ in range(20)] + [{"a0": 1.0e6, "a1": -5}]
    evs += [{k: v for k, v in e.items() if k != "a2"} for e in work.events[120:150]]
    matcher = wide(tile=64)
    matcher.add(work.subscriptions)
    live = {s.id: s for s in work.subscriptions}
    assert check(matcher, live, evs) > 0
    assert matcher._wide and len(matcher._layout.end_key) > 16 * matcher._layout.bits.shape[0]


def test_mixed_widths_and_the_automatic_choice():
    """Narrow and wide intervals in one index, in either mode; ``wide=None`` chooses by the
    mean width, and the choice is made again at every rebuild."""
    narrow = dense(n_subs=1500, n_events=40, d=6, k=3, width=0.1, seed=8)
    broad = dense(n_subs=1500, n_events=40, d=6, k=3, width=0.9, seed=9)
    subs = narrow.subscriptions + [Subscription(f"b{s.id}", s.expr, s.conjunctions) for s in broad.subscriptions]
    evs = narrow.events[:20] + broad.events[:20]
    for mode in (True, False):
        matcher = wide(tile=3, mode=mode)
        matcher.add(subs)
        check(matcher, subs, evs)
        assert matcher._wide is mode
    auto = wide(tile=3, tail_min=16, mode=None)
    auto.add(narrow.subscriptions)
    check(auto, narrow.subscriptions, evs)
    assert not auto._wide and auto._tile == auto.tile_words
    auto.remove([s.id for s in narrow.subscriptions])
    auto.add(broad.subscriptions)
    check(auto, broad.subscriptions, evs)
    assert auto._wide and auto._tile == 3


def test_columns_in_the_wide_mode_match_objects():
    """Subscriptions added as interval columns match as the same ones added as objects."""
    work = dense(n_subs=2000, n_events=50, d=5, k=3, width=0.7, seed=11)
    subs = work.subscriptions
    columnar = wide(tile=4)
    names = tuple(f"a{j}" for j in range(5))
    rows = [[(names.index(p.attr), *p.operand) for p in s.conjunctions[0]] for s in subs]
    columnar.add_intervals([s.id for s in subs], Intervals.of_rows(
        np.array([[a for a, _, _ in r] for r in rows]), np.array([[lo for _, lo, _ in r] for r in rows]),
        np.array([[hi for _, _, hi in r] for r in rows]), names))
    objects = wide(tile=4)
    objects.add(subs)
    assert columnar.match_events(work.events) == objects.match_events(work.events)
    check(columnar, subs, work.events)
    check(pickle.loads(pickle.dumps(columnar)), subs, work.events[:10])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_subs=st.integers(64, 700), tile=st.sampled_from([1, 2, 64]))
def test_hypothesis_values_on_bucket_edges_with_updates(seed, n_subs, tile):
    """Open and closed bounds on few distinct values (bucket edges fall on them), event values
    on them and next to them, missing attributes; inserts and deletes after the build."""
    rng = random.Random(seed)
    subs, evs = wide_workload(rng, n_subs)
    check_updates_after_build(wide(tile=tile, tail_min=16), rng, subs, evs, lambda m: m._wide)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees=st.lists(exprs, min_size=2, max_size=30), evs=st.lists(events, min_size=1, max_size=6),
       cut=st.integers(0, 30), drop=st.lists(st.integers(0, 29), max_size=10))
def test_hypothesis_any_subscriptions_insert_delete(trees, evs, cut, drop):
    """Any subscriptions (residual predicates, disjunctions) in the wide mode, with updates."""
    check_split_upserts(wide(tile=1, tail_min=2), subscriptions_of(trees), evs, cut, drop)


def test_residual_predicates_on_wide_slots():
    """Slots with an interval and residual predicates: the marking leaves them to the exact check."""
    rng = random.Random(5)
    subs = []
    for i in range(800):
        lo = rng.uniform(0, 30)
        preds = (pred("x", "between", (lo, lo + 70)), pred("y", "between", (lo / 2, lo / 2 + 80)),
                 pred("s", "!=", rng.choice("abc")), pred("z", "in", (1, 2, rng.randint(3, 5))))
        subs.append(Subscription.of(f"c{i}", And(preds[:2 + i % 3])))
    evs = [{"x": rng.uniform(-5, 105), "y": rng.uniform(-5, 105), "s": rng.choice("abcd"), "z": rng.randint(1, 5)}
           for _ in range(40)]
    matcher = wide(tile=2)
    matcher.add(subs)
    assert check(matcher, subs, evs) > 0
    assert matcher._wide


@pytest.mark.parametrize("mode", [True, False])
def test_empty_interval_never_matches(mode):
    """``a = 0 AND a = 1`` (an empty interval: its low end lies above its high end, in another
    bucket) never matches, also in the tail and after a rebuild (found by hypothesis)."""
    subs = subscriptions_of([pred("a", "=", 0.0), And((pred("a", "=", 0.0), pred("a", "=", 1.0)))])
    matcher = wide(tile=1, tail_min=2, mode=mode)
    matcher.match_events([{"a": 1.0}])
    matcher.add(subs)
    evs = [{"a": 1.0}, {"a": 0.0}, {"a": 0.5}, {"b": 1}]
    check(matcher, subs, evs)
    more = [Subscription.of(f"x{i}", pred("a", "<=", float(i))) for i in range(8)]
    matcher.add(more)  # over the tail's bound: the next match rebuilds
    check(matcher, subs + more, evs)


@pytest.mark.parametrize("n_subs, tile", [(64 * 6, 2), (64 * 6 + 1, 2), (64 * 7 - 1, 3), (1, 1), (130, 64), (700, 1025)])
def test_keys_from_the_marking_on_tile_edges_all_and_none(n_subs, tile):
    """The keys written straight from the marks (:func:`~matchers.bitmark.wide.match_wide`, then
    :func:`~matchers.bitmark.emit.gather_keys`): slot counts on and next to word and tile edges,
    events matching every slot, none, or some; a tail and deletes after the build."""
    rng = random.Random(n_subs + tile)
    subs = [Subscription.of(f"s{i}", And((pred("x", "between", (lo, lo + 70.0)), pred("y", ">=", lo / 3))))
            for i, lo in enumerate(rng.uniform(0, 30) for _ in range(n_subs))]
    evs = [{"x": 50.0, "y": 100.0}, {"x": -1.0, "y": 100.0}, {"y": 5.0}, {"x": 31.0, "y": 0.0}]
    evs += [{"x": rng.uniform(-5, 105), "y": rng.uniform(-5, 40)} for _ in range(12)]
    matcher = wide(tile=tile, tail_min=10**6)
    matcher.add(subs)
    assert check(matcher, subs, evs) > 0 and matcher._wide
    assert len(matcher.match_events(evs[:1])[0]) == n_subs and matcher.match_events(evs[1:3]) == [[], []]
    more = [Subscription.of(f"t{i}", pred("x", "<=", float(i))) for i in range(5)]
    matcher.add(more)  # the tail: after the indexed keys, then sorted
    gone = {s.id for s in subs[::3]}
    matcher.remove(list(gone))
    check(matcher, [s for s in subs if s.id not in gone] + more, evs)


@pytest.mark.parametrize("tile", [1, 2, 1025])
def test_positions_to_keys_with_several_slots_per_key(tile):
    """Matches written as positions in their tile (``uint16``, ``int32`` past 1,024 words a tile)
    and made keys: by the tile's first key where keys run on by one, else looked up (a key with
    several slots, deletes inside a tile); adds after the build and a pickled copy alike."""
    rng = random.Random(tile)
    subs = []
    for i in range(300):
        lo = rng.uniform(0, 30)
        one = And((pred("a", "between", (lo, lo + 70.0)), pred("b", ">=", lo / 2)))
        subs.append(Subscription.of(f"s{i}", Or((one, pred("b", "between", (lo, lo + 60.0)))) if i % 7 == 3 else one))
    evs = [{"a": rng.uniform(-5, 105), "b": rng.uniform(-5, 80)} for _ in range(16)] + [{"a": 50.0, "b": 90.0}]
    matcher = wide(tile=tile, tail_min=10**6)
    matcher.add(subs)
    assert check(matcher, subs, evs) > 0 and matcher._wide
    matcher.remove([s.id for s in subs[5:40:2]])
    left = [s for i, s in enumerate(subs) if not (5 <= i < 40 and i % 2)]
    more = [Subscription.of(f"t{i}", pred("a", ">=", float(10 * i))) for i in range(4)]
    matcher.add(more)
    check(matcher, left + more, evs)
    check(pickle.loads(pickle.dumps(matcher)), left + more, evs)


@pytest.mark.parametrize("mode", [True, False])
def test_output_reused_only_when_dropped(mode):
    """A match's keys go to the last match's output only when nothing refers to it any more:
    matches kept by the caller (or a view of their keys) stay intact; dropped ones are reused."""
    work = dense(n_subs=700, n_events=40, d=3, k=2, width=0.8, seed=5)
    matcher = wide(tile=2, mode=mode)
    matcher.add(work.subscriptions)
    batch_a, batch_b = matcher.encode(work.events[:20]), matcher.encode(work.events[20:])
    first = matcher.match(batch_a)
    want_a = first.keys.copy()
    view = first.keys[3:]
    del first
    second = matcher.match(batch_b)  # the first's output is still referred to by the view
    want_b = second.keys.copy()
    assert (view == want_a[3:]).all() and not np.shares_memory(second.keys, view)
    del view
    matcher.match(matcher.encode(work.events))  # dropped at once: its output is kept for the next
    kept = matcher._outs[-1].ctypes.data  # (no reference: one would keep it from reuse)
    again = matcher.match(batch_a)
    assert again.keys.ctypes.data == kept and (again.keys == want_a).all() and (second.keys == want_b).all()
    check(matcher, work.subscriptions, work.events)
    check(pickle.loads(pickle.dumps(matcher)), work.subscriptions, work.events)


def test_key_buffer_grows_and_chunks(monkeypatch):
    """A chunk with more keys than the key buffer holds (it grows inside the kernel and is kept
    for the next match), and batches cut into several chunks; a pickled copy matches alike."""
    work = dense(n_subs=3000, n_events=80, d=2, k=1, width=0.95, seed=12)
    matcher = wide(tile=4)
    matcher.add(work.subscriptions)
    assert check(matcher, work.subscriptions, work.events) > 1 << 16
    assert len(matcher._keys) == 1 and len(matcher._keys[0]) > 1 << 16
    monkeypatch.setattr("matchers.bitmark.CHUNK_EVENTS", 7)
    assert check(matcher, work.subscriptions, work.events[:30]) > 0
    check(pickle.loads(pickle.dumps(matcher)), work.subscriptions, work.events[:10])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_subs=st.integers(1, 400), tile=st.integers(1, 5),
       width=st.sampled_from([0.5, 0.9, 1.0]))
def test_hypothesis_keys_from_the_marking(seed, n_subs, tile, width):
    """Random slot counts and tiles, wide intervals up to the whole span (all match), both modes
    on the same subscriptions and events."""
    rng = random.Random(seed)
    subs = []
    for i in range(n_subs):
        lo = rng.uniform(0, 100 * (1 - width))
        subs.append(Subscription.of(f"s{i}", And((pred("a", "between", (lo, lo + 100 * width)),
                                                  pred("b", "between", (lo / 2, lo / 2 + 100 * width))))))
    evs = [{"a": rng.choice([rng.uniform(-1, 101), 0.0, 100.0]), "b": rng.uniform(-1, 101)} for _ in range(8)]
    for mode in (True, False):
        matcher = wide(tile=tile, mode=mode)
        matcher.add(subs)
        check(matcher, subs, evs)
        assert matcher._wide is mode

"""The bit-marking matcher against the oracle where its own logic lives: interval bounds,
rebuilds under insert/delete sequences, mixed words, and the memory bound of a batch."""

from __future__ import annotations

import math
import random
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers.bitmark import BitMarkMatcher
from matchers.bitmark import kernels as K
from matchers.catalog import create
from matchers.expr import And, Subscription, pred
from scripts.workloads import dense
from tests.differential import check, insert_delete, subscriptions_of
from tests.strategies import events, exprs, random_event, random_subscriptions

ROOT = Path(__file__).resolve().parents[3]


def small(tail_min: int = 16):
    """A bit-marking matcher that rebuilds after few changes (exercises every path)."""
    matcher = create("bitmark")
    assert isinstance(matcher, BitMarkMatcher)
    matcher.tail_min = tail_min
    return matcher


def test_bounds_are_exact_at_the_operand():
    ops = ["=", "<", "<=", ">", ">="]
    subs = [Subscription.of(f"{op}", pred("x", op, 5)) for op in ops]
    subs += [Subscription.of("between", pred("x", "between", (5, 5))),
             Subscription.of("empty", And((pred("x", ">", 6), pred("x", "<", 4)))),
             Subscription.of("both", And((pred("x", ">", 4), pred("x", "<=", 5), pred("y", "!=", 1))))]
    matcher = small()
    matcher.add(subs)
    values = [5, math.nextafter(5, math.inf), math.nextafter(5, -math.inf), 4, 6, -1e300, 1e300, "5", True]
    evs = [{"x": v} for v in values] + [{"x": v, "y": 2} for v in values] + [{}, {"y": 1}]
    check(matcher, {s.id: s for s in subs}, evs)


@pytest.mark.parametrize("seed, width", [(1, 0.3), (2, 0.3), (3, 0.8)])
def test_dense_and_mixed_sequences_match_oracle(seed, width):
    """Width 0.8: most slots survive, most of them without a check (outside every partial
    row), and events with more matches than the key bitmap has words."""
    rng = random.Random(seed)
    work = dense(n_subs=3000, n_events=80, d=6, k=3, width=width, seed=seed)
    others = random_subscriptions(rng, 400, prefix="r")
    pool = work.subscriptions + others
    evs = work.events[:40] + [random_event(rng) for _ in range(40)]
    for e in evs[:40:4]:
        e.update(random_event(rng))  # dense events with strings, booleans and missing values mixed in
    matcher = small(tail_min=64)
    live = insert_delete(matcher, pool, evs, rng, steps=4, batch=900, gone=lambda step, _: 150 + 100 * step)
    assert len(matcher) == len(live)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees=st.lists(exprs, min_size=2, max_size=30), evs=st.lists(events, min_size=1, max_size=6),
       cut=st.integers(0, 30), drop=st.lists(st.integers(0, 29), max_size=10))
def test_hypothesis_insert_delete_matches_oracle(trees, evs, cut, drop):
    check_split_upserts(small(tail_min=2), subscriptions_of(trees), evs, cut, drop)


def check_split_upserts(matcher: BitMarkMatcher, subs: list[Subscription], evs: list[dict], cut: int,
                        drop: list[int]) -> None:
    """``subs[:cut]`` added and built, the rest added, the ids ``h<i>`` of ``drop`` removed,
    then ``subs[:cut]`` added again: checked against the oracle after the removal and the re-add."""
    matcher.add(subs[:cut])
    matcher.match_events(evs)  # builds the index over the first part
    matcher.add(subs[cut:])
    live = {s.id: s for s in subs}
    gone = [f"h{i}" for i in drop]
    matcher.remove(gone)
    for sub_id in gone:
        live.pop(sub_id, None)
    check(matcher, live, evs)
    matcher.add(subs[:cut])  # re-add (upsert) after deletes, then a rebuild at the next match
    live.update({s.id: s for s in subs[:cut]})
    check(matcher, live, evs)


BOUNDS = [-3.0, 0.0, 1.0, 2.5, 4.0, 5.0, 6.0, 7.5, 9.0, 10.0]


def wide_workload(rng: random.Random, n_subs: int) -> tuple[list[Subscription], list[dict]]:
    """Wide intervals with few distinct bounds (so bucket edges fall on them) and events
    whose values sit on those bounds, next to them, or beyond them."""
    subs = []
    for i in range(n_subs):
        preds = []
        for attr in rng.sample("abcd", rng.randint(1, 4)):
            op = rng.choice(["between"] * 4 + ["=", "<", "<=", ">", ">="])
            if op == "between":
                lo, hi = sorted((rng.choice(BOUNDS[:5]), rng.choice(BOUNDS[3:])))
                preds.append(pred(attr, op, (lo, hi)))
            else:
                preds.append(pred(attr, op, rng.choice(BOUNDS)))
        subs.append(Subscription.of(f"w{i}", And(tuple(preds)) if len(preds) > 1 else preds[0]))
    near = [f(x, t) for x in BOUNDS for f, t in ((lambda x, t: x, 0), (math.nextafter, -math.inf),
                                                 (math.nextafter, math.inf))]
    values = near + [-1e9, 1e9, 3.3, 8.8]
    evs = [{a: rng.choice(values) for a in "abcd" if rng.random() < 0.95} for _ in range(12)]
    return subs, evs


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_subs=st.integers(64, 700), tile_words=st.sampled_from([1, 2, 256]))
def test_hypothesis_wide_intervals_and_values_on_bucket_edges(seed, n_subs, tile_words):
    """Most intervals partly cover the event's bucket; its value equals a bucket edge, an
    interval's bound or a neighbour of one: the walk over the ends decides them exactly,
    also across tiles, in the tail and after deletes."""
    rng = random.Random(seed)
    subs, evs = wide_workload(rng, n_subs)
    matcher = create("bitmark", tile_words=tile_words)
    assert isinstance(matcher, BitMarkMatcher)
    matcher.tail_min = 16
    check_updates_after_build(matcher, rng, subs, evs, lambda m: len(m._layout.end_val) > 0)


def check_updates_after_build(matcher: BitMarkMatcher, rng: random.Random, subs: list[Subscription],
                              evs: list[dict], built: Callable[[BitMarkMatcher], bool]) -> None:
    """Three quarters of ``subs`` added and checked (the build, which must satisfy ``built``),
    then the rest added and an eighth of the first part removed: checked twice (the tail and
    the deleted slots, then a rebuild)."""
    cut = len(subs) * 3 // 4
    matcher.add(subs[:cut])
    live = {s.id: s for s in subs[:cut]}
    check(matcher, live, evs)  # built over the first part
    assert built(matcher)
    matcher.add(subs[cut:])
    gone = rng.sample(sorted(live), len(live) // 8)
    matcher.remove(gone)
    live.update({s.id: s for s in subs[cut:]})
    for sub_id in gone:
        del live[sub_id]
    check(matcher, live, evs)  # the tail, the deleted slots, then a rebuild
    check(matcher, live, evs)


def test_wide_dense_tiles_match_oracle_and_reuse_the_slot_bitmap():
    """Width 0.7 over many small tiles in the narrow mode: the envelopes leave most words
    open, so after its first tile an event ORs whole rows (the dense path); events match
    thousands of keys (the key bitmap of :func:`~matchers.bitmark.emit.emit_keys`).
    Batches of several sizes, a pickled copy and a tail reuse (or replace) the zero slot
    bitmap of the last match."""
    import pickle

    work = dense(n_subs=4000, n_events=60, d=8, k=4, width=0.7, seed=5)
    matcher = create("bitmark", tile_words=4, wide=False)
    assert isinstance(matcher, BitMarkMatcher)
    matcher.tail_min = 64
    matcher.add(work.subscriptions)
    live = {s.id: s for s in work.subscriptions}
    total = check(matcher, live, work.events[:40])
    assert total / 40 > 64 * 4  # more matches than the key bitmap has words
    layout = matcher._layout
    vals = K.event_values(matcher.encode(work.events[:40]).arrays, matcher._col_of_attr, matcher._n_cols)
    is_open = np.ones((40, len(layout.live)), dtype=bool)
    for i in range(2):
        c = layout.env_col[:, i]
        v = vals[:, np.where(c >= 0, c, 0)]
        is_open &= (c < 0) | ((v >= layout.env_lo[:, i]) & (v <= layout.env_hi[:, i]))
    assert is_open.mean() > 0.5  # the dense path is taken
    check(matcher, live, work.events[40:41])
    check(matcher, live, work.events[:60])
    check(pickle.loads(pickle.dumps(matcher)), live, work.events[:20])
    matcher.add(work.subscriptions[:100])  # upserts: dead slots and a tail, then the same batch
    check(matcher, live, work.events[:40])


def test_batch_memory_is_bounded():
    """A large batch whose satisfied residual predicates would need ~600 MB at once stays
    within a fixed budget: events are matched in chunks."""
    code = textwrap.dedent("""
        import resource, numpy as np
        from matchers.catalog import create
        from matchers.expr import And, Subscription, pred
        from scripts.workloads import dense
        work = dense(n_subs=2000, n_events=20000, d=20, k=10, seed=3)
        subs = [Subscription.of(s.id, And((s.expr, pred(f"a{i % 20}", "!=", -float(i)))))
                for i, s in enumerate(work.subscriptions)]
        m = create("bitmark")
        m.add(subs)
        batch = m.encode(work.events)
        m.match(batch.slice(0, 10))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = m.match(batch)
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(grown * 1024, result.total, len(m.phase1))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600,
                         cwd=ROOT)
    grown, total, residual = map(int, out.stdout.split())
    assert residual == 2000
    assert grown < 160 * 2**20, f"matching grew the process by {grown / 2**20:.0f} MB"

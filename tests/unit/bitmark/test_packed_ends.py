"""The wide mode's packed ends (:func:`matchers.bitmark.wide.build_wide_ends`): the same ends as
the narrow mode's layout, decoded; uint32 and uint64 keys; against the oracle and the narrow
mode with bounds on bucket edges, empty intervals, deletes and re-adds; older wide pickles."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchers.bitmark import BitMarkMatcher
from matchers.bitmark import ends as EN
from matchers.bitmark import kernels as K
from matchers.bitmark import wide as WK
from matchers.catalog import create
from matchers.expr import And, Subscription, pred
from scripts.workloads import dense
from tests.differential import check
from tests.unit.bitmark.test_bitmark import check_updates_after_build, wide_workload


def matcher_of(mode: bool, tile: int = 2, tail_min: int = 16) -> BitMarkMatcher:
    """A bitmark matcher in the wide mode (``mode``) or the narrow one, tiles of ``tile`` words."""
    matcher = create("bitmark", wide=mode, tile_words=tile)
    assert isinstance(matcher, BitMarkMatcher)
    matcher.wide_tile = tile
    matcher.tail_min = tail_min
    return matcher


def decoded(matcher: BitMarkMatcher) -> list[tuple[int, int, float, int]]:
    """The wide layout's ends as ``(segment, slot, bound, key)`` in stored order."""
    layout, tile = matcher._layout, matcher._tile
    shift = EN.offset_bits(tile)
    out = []
    for seg in range(len(layout.end_off) - 1):
        row = seg // 2 // max(1, -(-len(layout.live) // tile))
        g = seg // 2 % max(1, -(-len(layout.live) // tile))
        for i in range(layout.end_off[seg], layout.end_off[seg + 1]):
            key = int(layout.end_key[i])
            rank, pos = key >> shift, key & ((1 << shift) - 1)
            assert 0 <= rank < layout.val_off[row + 1] - layout.val_off[row]
            out.append((seg, g * 64 * tile + pos, float(layout.end_val[layout.val_off[row] + rank]), key))
    return out


@pytest.mark.parametrize("seed, tile", [(1, 1), (2, 2), (3, 64), (4, 1 << 24)])
def test_packed_ends_are_the_narrow_layouts_ends(seed, tile):
    """Decoded (bound by rank in its row's distinct bounds, slot by position in its tile), the
    packed ends are the ends :func:`~matchers.bitmark.kernels.build_ends` makes over the same
    slots, segment by segment, sorted by bound; each row's bounds are distinct and sorted.  A tile of
    2**24 words leaves 32 - 30 bits to the rank: uint64 keys once a row holds 4 bounds."""
    rng = random.Random(seed)
    subs, _ = wide_workload(rng, 600)
    subs += dense(n_subs=1500, n_events=1, d=4, k=2, width=0.7, seed=seed).subscriptions
    matcher = matcher_of(True, tile)
    matcher.add(subs)
    matcher.match_events([{}])
    layout = matcher._layout
    assert matcher._wide and len(layout.end_slot) == 0 and len(layout.end_key) > 0
    assert layout.end_key.dtype == (np.uint64 if tile == 1 << 24 else np.uint32)
    for r in range(len(layout.val_off) - 1):
        assert np.all(np.diff(layout.end_val[layout.val_off[r]:layout.val_off[r + 1]]) > 0)
    idx_of_col = np.full(matcher._n_cols, -1, dtype=np.int64)
    idx_of_col[layout.idx_col] = np.arange(len(layout.idx_col))
    slots = matcher._slots()
    ib = K.interval_buckets(slots, matcher._n_main, idx_of_col, layout.edge_off, layout.edges)
    off, val, slot = EN.build_ends(slots, matcher._n_main, idx_of_col, layout.row_start, layout.edge_off,
                                   layout.edges, tile, ib)
    assert np.array_equal(off, layout.end_off)
    got = decoded(matcher)
    for seg in range(len(off) - 1):
        mine = [(s, v) for g, s, v, _ in got if g == seg]
        ranks = [k >> EN.offset_bits(tile) for g, _, _, k in got if g == seg]
        assert ranks == sorted(ranks)
        assert sorted(mine) == sorted(zip(slot[off[seg]:off[seg + 1]].tolist(), val[off[seg]:off[seg + 1]].tolist(), strict=True))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_subs=st.integers(64, 700), tile=st.sampled_from([1, 2, 64, 1 << 24]))
def test_hypothesis_packed_ends_match_the_oracle_and_the_narrow_mode(seed, n_subs, tile):
    """Bounds and event values on and next to the bucket edges, missing attributes, empty
    intervals; the wide mode (uint32 keys, uint64 at tile 2**24) and the narrow mode give the
    oracle's matches, before and after inserts and deletes."""
    rng = random.Random(seed)
    subs, evs = wide_workload(rng, n_subs)
    subs.append(Subscription.of("empty", And((pred("a", "=", 0.0), pred("a", "=", 1.0)))))
    wide, narrow = matcher_of(True, tile), matcher_of(False)
    check_updates_after_build(wide, random.Random(seed), subs, evs, lambda m: m._wide)
    check_updates_after_build(narrow, random.Random(seed), subs, evs, lambda m: not m._wide)
    assert wide.match_events(evs) == narrow.match_events(evs)


@pytest.mark.parametrize("seed", [5, 6])
def test_deletes_and_readds_in_the_wide_mode(seed):
    """Dense wide intervals: a quarter removed (the live mask, then a rebuild), re-added (the
    tail, then a rebuild): the oracle's matches at every step, the same as the narrow mode's."""
    work = dense(n_subs=3000, n_events=40, d=5, k=3, width=0.8, seed=seed)
    wide, narrow = matcher_of(True, 8, tail_min=64), matcher_of(False, 8, tail_min=64)
    live = {s.id: s for s in work.subscriptions}
    gone = random.Random(seed).sample(sorted(live), 750)
    for matcher in (wide, narrow):
        matcher.add(work.subscriptions)
        check(matcher, live, work.events)
        matcher.remove(gone)
    for sub_id in gone:
        del live[sub_id]
    for _ in range(2):  # the deleted slots, then a rebuild without them
        check(wide, live, work.events)
        assert wide.match_events(work.events) == narrow.match_events(work.events)
    again = [s for s in work.subscriptions if s.id in set(gone)]
    live.update({s.id: s for s in again})
    for matcher in (wide, narrow):
        matcher.add(again)
    for _ in range(2):  # the tail, then a rebuild with them
        check(wide, live, work.events)
        assert wide.match_events(work.events) == narrow.match_events(work.events)
    assert wide._wide and not narrow._wide


def test_a_wide_layout_without_packed_ends_is_rebuilt():
    """A wide layout as pickled before the packed ends (``end_slot`` set, no ``end_key``) is
    rebuilt at the next match."""
    work = dense(n_subs=800, n_events=20, d=4, k=2, width=0.7, seed=9)
    matcher = matcher_of(True, 2)
    matcher.add(work.subscriptions)
    check(matcher, work.subscriptions, work.events)
    layout = matcher._layout
    idx_of_col = np.full(matcher._n_cols, -1, dtype=np.int64)
    idx_of_col[layout.idx_col] = np.arange(len(layout.idx_col))
    slots = matcher._slots()
    ib = K.interval_buckets(slots, matcher._n_main, idx_of_col, layout.edge_off, layout.edges)
    off, val, slot = EN.build_ends(slots, matcher._n_main, idx_of_col, layout.row_start, layout.edge_off,
                                   layout.edges, 2, ib)
    matcher._layout = layout._replace(end_off=off, end_val=val, end_slot=slot, end_key=np.zeros(0, dtype=np.uint32),
                                      val_off=np.zeros(1, dtype=np.int64))
    assert matcher._stale()
    check(matcher, work.subscriptions, work.events)
    assert len(matcher._layout.end_slot) == 0 and len(matcher._layout.end_key) > 0


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), tile=st.sampled_from([1, 2, 1024, 1 << 24]))
def test_end_limits_are_the_ranks_of_the_value(seed, tile):
    """:func:`~matchers.bitmark.wide.end_limits` (lockstep binary searches) against numpy's
    ``searchsorted``: per event and attribute, how many of its row's bounds are <= and < its
    value (rows of 0 to 40 distinct bounds, values on them, between and beyond them)."""
    rng = np.random.default_rng(seed)
    n_rows = int(rng.integers(1, 6))
    bounds = [np.unique(rng.integers(0, 30, int(rng.integers(0, 40))).astype(float)) for _ in range(n_rows)]
    val_off = np.zeros(n_rows + 1, dtype=np.int64)
    val_off[1:] = np.cumsum([len(b) for b in bounds])
    n = int(rng.integers(1, 30))
    vals = rng.integers(-2, 33, (n, 2)).astype(float)
    rows = rng.integers(0, n_rows, (n, 2))
    layout = create("bitmark")._layout._replace(end_val=np.concatenate(bounds), val_off=val_off,
                                                idx_col=np.array([0, 1], dtype=np.int32))
    lim = WK.end_limits(vals, rows, layout, tile) >> EN.offset_bits(tile)
    for e in range(n):
        for j in range(2):
            row = bounds[rows[e, j]]
            assert lim[e, j, 0] == np.searchsorted(row, vals[e, j], "right")
            assert lim[e, j, 1] == np.searchsorted(row, vals[e, j], "left")


@pytest.mark.parametrize("seed", [11, 12])
def test_signed_zero_and_negative_bounds_rank_as_their_values(seed):
    """Bounds -0.0 and 0.0 (equal floats, different bits), negative and huge ones, shuffled
    among wide dense intervals: the radix sort ranks them by value (one distinct bound for both
    zeros), and the wide mode gives the oracle's matches for events at, next to and between them."""
    rng = random.Random(seed)
    points = [-1e300, -2.5, -1.0, -0.0, 0.0, 1.0, 2.5, 1e300]
    subs = dense(n_subs=700, n_events=1, d=3, k=2, width=0.7, seed=seed).subscriptions
    for i in range(900):
        lo, hi = sorted((rng.choice(points), rng.choice(points)))
        op = rng.choice(["between", "<", "<=", ">", ">=", "="])
        value = (lo, hi) if op == "between" else rng.choice(points)
        subs.append(Subscription.of(f"z{i}", pred(rng.choice(["a0", "a1"]), op, value)))
    values = [-0.0, 0.0, math.nextafter(0.0, -math.inf), math.nextafter(0.0, math.inf), -1.0, -3.0, 1.0, 0.5, -0.5]
    evs = [{"a0": rng.choice(values), "a1": rng.choice(values), "a2": rng.choice(values)} for _ in range(40)]
    matcher = matcher_of(True, 2)
    matcher.add(subs)
    check(matcher, subs, evs)
    layout = matcher._layout
    assert matcher._wide
    for r in range(len(layout.val_off) - 1):
        row = layout.end_val[layout.val_off[r]:layout.val_off[r + 1]]
        assert np.all(np.diff(row) > 0) and not np.any(np.signbit(row) & (row == 0))

"""bitmark's build kernels against numpy references of their contracts: the marking rows and
check mask (:func:`~matchers.bitmark.kernels.build_bits`, built a block of words at a time) and
the ends (:func:`~matchers.bitmark.ends.build_ends`, radix-sorted per row), on random slots
with tied, infinite, signed-zero and empty intervals, columns not indexed and residual ids."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matchers.bitmark import ends as EN
from matchers.bitmark import kernels as K
from matchers.bitmark import sorts as SO
from matchers.bitmark.layout import Slots


def random_index(seed: int, n: int):
    """Random slots over 5 columns (the first 3 indexed, with 0 to 6 edges each) and their
    index description: ``(slots, idx_of_col, row_start, edge_off, edges)``."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 4, n)
    off = np.zeros(n + 1, dtype=np.int64)
    off[1:] = np.cumsum(counts)
    cols, lo, hi = [], [], []
    points = np.array([-np.inf, -2.0, -0.0, 0.0, 1.0, 3.0, 3.5, 7.0, 9.0, np.inf])
    for c in counts.tolist():
        chosen = rng.choice(5, c, replace=False)
        for col in chosen.tolist():
            a, b = rng.choice(points, 2)
            if rng.random() < 0.9:
                a, b = min(a, b), max(a, b)  # else possibly empty (lo > hi)
            a = -np.inf if a == np.inf else a
            b = np.inf if b == -np.inf else b
            cols.append(col)
            lo.append(a)
            hi.append(b)
    res_count = (rng.random(n) < 0.1).astype(np.int64)
    res_off = np.zeros(n + 1, dtype=np.int64)
    res_off[1:] = np.cumsum(res_count)
    slots = Slots(np.arange(n, dtype=np.int32), off, np.array(cols, dtype=np.int32), np.array(lo, dtype=np.float64),
                  np.array(hi, dtype=np.float64), res_off, np.zeros(res_off[-1], dtype=np.int32))
    edges = [np.unique(rng.choice(points[1:-1], int(rng.integers(0, 7)))) for _ in range(3)]
    edge_off = np.zeros(4, dtype=np.int64)
    edge_off[1:] = np.cumsum([len(e) for e in edges])
    row_start = np.zeros(4, dtype=np.int64)
    row_start[1:] = np.cumsum([len(e) + 2 for e in edges])
    idx_of_col = np.array([0, 1, 2, -1, -1], dtype=np.int64)
    return slots, idx_of_col, row_start, edge_off, np.concatenate(edges)


def intervals(slots: Slots, idx_of_col, edge_off, edges):
    """Per interval: slot, indexed attribute (-1), bounds, the buckets of its bounds and whether
    it starts / ends inside them."""
    s = np.repeat(np.arange(len(slots.iv_off) - 1), np.diff(slots.iv_off))
    j = idx_of_col[slots.iv_col]
    lb, hb = np.zeros(len(s), dtype=np.int64), np.zeros(len(s), dtype=np.int64)
    starts, ends = np.zeros(len(s), dtype=bool), np.zeros(len(s), dtype=bool)
    for t in range(len(s)):
        if j[t] < 0:
            continue
        e = edges[edge_off[j[t]]:edge_off[j[t] + 1]]
        lb[t] = np.searchsorted(e, slots.iv_lo[t], "right")
        hb[t] = np.searchsorted(e, slots.iv_hi[t], "right")
        starts[t] = slots.iv_lo[t] > (e[lb[t] - 1] if lb[t] > 0 else -np.inf)
        ends[t] = slots.iv_hi[t] < (e[hb[t]] if hb[t] < len(e) else np.inf)
    return s, j, lb, hb, starts, ends


def reference_bits(slots, n, idx_of_col, row_start, edge_off, edges, at_edge):
    W = (n + 63) // 64
    bits = np.zeros((row_start[-1], W * 64), dtype=bool)
    check = np.zeros(W * 64, dtype=bool)
    check[:n] = np.diff(slots.res_off)[:n] > 0
    s, j, lb, hb, starts, _ = intervals(slots, idx_of_col, edge_off, edges)
    for t in np.flatnonzero(s < n).tolist():
        if j[t] < 0 or not slots.iv_lo[t] <= slots.iv_hi[t]:
            check[s[t]] = True
        if j[t] < 0:
            continue
        nb = edge_off[j[t] + 1] - edge_off[j[t]] + 1
        for b in range(nb):
            bits[row_start[j[t]] + b, s[t]] = hb[t] < b or lb[t] > b or (at_edge and lb[t] == b and starts[t])
        bits[row_start[j[t]] + nb, s[t]] = True
    return np.packbits(bits, axis=1, bitorder="little").view(np.uint64), \
        np.packbits(check, bitorder="little").view(np.uint64)


def reference_ends(slots, n, idx_of_col, row_start, edge_off, edges, tile):
    tiles = max(1, (n + 64 * tile - 1) // (64 * tile))
    s, j, lb, hb, starts, ends = intervals(slots, idx_of_col, edge_off, edges)
    segs: dict[int, list[tuple[float, int]]] = {}
    for t in np.flatnonzero((s < n) & (j >= 0)).tolist():
        g = s[t] // (64 * tile)
        if starts[t]:
            segs.setdefault(2 * ((row_start[j[t]] + lb[t]) * tiles + g), []).append((slots.iv_lo[t], s[t]))
        if ends[t]:
            segs.setdefault(2 * ((row_start[j[t]] + hb[t]) * tiles + g) + 1, []).append((slots.iv_hi[t], s[t]))
    return tiles, {seg: sorted(items) for seg, items in segs.items()}  # by bound, ties by slot


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 700), at_edge=st.booleans())
def test_build_bits_is_its_contract(seed, n, at_edge):
    """Several blocks of words (``BITS_BLOCK``), a partial last word, at and off the edges."""
    slots, idx_of_col, row_start, edge_off, edges = random_index(seed, n + 40)
    bits = np.full((row_start[-1], (n + 63) // 64), 12345, dtype=np.uint64)  # every entry is written
    check = K.build_bits(slots, n, idx_of_col, row_start, edge_off, edges, at_edge,
                         K.interval_buckets(slots, n, idx_of_col, edge_off, edges), bits)
    want_bits, want_check = reference_bits(slots, n, idx_of_col, row_start, edge_off, edges, at_edge)
    assert np.array_equal(bits, want_bits) and np.array_equal(check, want_check)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_build_bits_over_many_blocks(seed):
    n = 64 * K.BITS_BLOCK * 3 + 17
    slots, idx_of_col, row_start, edge_off, edges = random_index(seed, n)
    bits = np.full((row_start[-1], (n + 63) // 64), 12345, dtype=np.uint64)
    got = bits, K.build_bits(slots, n, idx_of_col, row_start, edge_off, edges, seed % 2 == 0,
                             K.interval_buckets(slots, n, idx_of_col, edge_off, edges), bits)
    want = reference_bits(slots, n, idx_of_col, row_start, edge_off, edges, seed % 2 == 0)
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 900), tile=st.sampled_from([1, 2, 5, 256]))
def test_build_ends_is_its_contract(seed, n, tile):
    """Per segment, the ends sorted by bound, ties in slot order (-0.0 equal to 0.0)."""
    slots, idx_of_col, row_start, edge_off, edges = random_index(seed, n + 30)
    off, val, slot = EN.build_ends(slots, n, idx_of_col, row_start, edge_off, edges, tile,
                                   K.interval_buckets(slots, n, idx_of_col, edge_off, edges))
    tiles, want = reference_ends(slots, n, idx_of_col, row_start, edge_off, edges, tile)
    assert len(off) == 2 * row_start[-1] * tiles + 1 and off[-1] == len(val) == len(slot)
    for seg in range(len(off) - 1):
        got = list(zip(val[off[seg]:off[seg + 1]].tolist(), slot[off[seg]:off[seg + 1]].tolist(), strict=True))
        assert got == want.get(seg, [])


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 900), tile=st.sampled_from([1, 2, 5, 256]))
def test_wide_tags_build_the_same_ends(seed, n, tile):
    """The ``int64`` tags (past ``small_tags``: billions of slots) give the ends the ``uint32`` ones give."""
    slots, idx_of_col, row_start, edge_off, edges = random_index(seed, n + 30)
    args = (slots, n, idx_of_col, row_start, edge_off, edges, tile, K.interval_buckets(slots, n, idx_of_col, edge_off, edges))
    assert EN.small_tags(n, tile) and not EN.small_tags(1 << 32, tile)
    for build in (EN._build_ends, EN._build_wide_ends):
        small, wide = build(*args, np.empty(0, np.uint32)), build(*args, np.empty(0, np.int64))
        assert all(np.array_equal(a, b) for a, b in zip(small, wide, strict=True))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 900), tile=st.sampled_from([1, 5, 1 << 24]))
def test_packed_ends_decode_to_the_narrow_ends(seed, n, tile):
    """The wide mode's packed ends, decoded (bound by its rank among its row's distinct bounds, slot
    by its position in its tile), are the narrow mode's; ``uint32`` exactly when the most distinct
    bounds of a row fit (tiles of 2**24 words: 4 ranks; rows often longer with fewer distinct)."""
    slots, idx_of_col, row_start, edge_off, edges = random_index(seed, n + 30)
    args = (slots, n, idx_of_col, row_start, edge_off, edges, tile, K.interval_buckets(slots, n, idx_of_col, edge_off, edges))
    off, key32, key64, val_off, val = EN.build_wide_ends(*args)
    n_off, n_val, n_slot = EN.build_ends(*args)
    shift = EN.offset_bits(tile)
    rows = row_start[-1]
    tiles = (len(off) - 1) // max(1, 2 * rows)
    distinct = [len(np.unique(val[val_off[r]:val_off[r + 1]])) for r in range(rows)]
    assert distinct == np.diff(val_off).tolist() and np.array_equal(off, n_off)
    assert (len(key64) == 0) == (max(distinct, default=0) - 1 < 1 << (32 - shift))
    packed = (key64 if len(key64) else key32).astype(np.int64)
    for seg in range(len(off) - 1):
        r, g = seg // (2 * tiles), seg // 2 % tiles
        k = packed[off[seg]:off[seg + 1]]
        assert np.array_equal(val[val_off[r] + (k >> shift)], n_val[off[seg]:off[seg + 1]])
        assert np.array_equal(g * 64 * tile + (k & ((1 << shift) - 1)), n_slot[off[seg]:off[seg + 1]])


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 3000), spread=st.integers(0, 64), shift=st.integers(0, 63))
def test_radix_sort_is_a_stable_sort(seed, n, spread, shift):
    """Keys differing in ``spread`` bits from bit ``shift`` (none, a few, all 64): the order of a
    stable argsort, carried values included."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2**63, dtype=np.uint64) * np.uint64(2) + np.uint64(rng.integers(0, 2))
    noise = rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n).astype(np.uint64)
    mask = np.uint64(((1 << spread) - 1) << shift & (2**64 - 1))
    key = (base & ~mask) | (noise & mask)
    carry = np.arange(n, dtype=np.int64)
    want = np.argsort(key, kind="stable")
    hist = np.empty((64 // SO.RADIX_BITS + 1, 1 << SO.RADIX_BITS), dtype=np.int64)
    SO.radix_sort(key, carry, np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.int64), hist)
    assert np.array_equal(carry, want) and np.all(key[1:] >= key[:-1])


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_edges=st.integers(0, 70), scale=st.sampled_from([1e-310, 1.0, 1e6, 1e300]))
def test_interval_buckets_count_the_edges_at_or_below(seed, n_edges, scale):
    """Against ``searchsorted``: bounds on, between and beyond the edges, infinite ones, edges
    clustered or spanning huge (overflowing) and subnormal ranges, attributes not indexed."""
    rng = np.random.default_rng(seed)
    raw = np.concatenate([rng.integers(-50, 50, n_edges), rng.normal(0, 3, n_edges // 3)]) * scale
    edges = [np.unique(raw[: n_edges]), np.unique(raw), np.zeros(0)]
    values = np.concatenate([raw, raw + scale / 2, [-np.inf, np.inf, -0.0, 0.0, 1e308, -1e308]])
    n = 200
    cols = rng.integers(0, 4, n).astype(np.int32)
    lo, hi = rng.choice(values, n), rng.choice(values, n)
    slots = Slots(np.arange(n, dtype=np.int32), np.arange(n + 1, dtype=np.int64), cols, lo, hi,
                  np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int32))
    edge_off = np.array([0, *np.cumsum([len(e) for e in edges])], dtype=np.int64)
    got = K.interval_buckets(slots, n, np.array([0, 1, 2, -1]), edge_off, np.concatenate(edges))
    for t in range(n):
        if cols[t] == 3:
            assert got[t].tolist() == [-1, -1]
        else:
            e = edges[cols[t]]
            assert got[t].tolist() == [np.searchsorted(e, lo[t], "right"), np.searchsorted(e, hi[t], "right")]

"""VCI index over integer cells, every scheme, against brute force; the baselines too."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matchers.vci.interval_index import IntervalIndex, bitmap_bytes
from matchers.vci.layout import SCHEMES, distance_table, geometry, lengths
from scripts.bench.vci import make
from tests.unit.vci.naive import stab_cells

ALL = sorted(SCHEMES)


def _check(index, live: dict[int, tuple[int, int]], R: int) -> None:
    cells = np.arange(-3, R + 3)
    offsets, ids = index.query_many(cells)
    counts = index.count_many(cells)
    assert len(index) == len(live)
    for k, j in enumerate(cells.tolist()):
        expected = stab_cells(live, j)
        assert sorted(ids[offsets[k]:offsets[k + 1]].tolist()) == expected, (j, index)
        assert counts[k] == len(expected)


def _random_intervals(rng, n, R, W, first_id=0):
    xs = rng.integers(0, R, n)
    ys = np.minimum(R - 1, xs + rng.integers(0, W + 1, n))
    ids = np.arange(first_id, first_id + n)
    return ids, xs, ys


@pytest.mark.parametrize("kind", ALL + ["Dlist", "tree"])
@pytest.mark.parametrize("R,L,W", [(1, 1, 0), (7, 4, 6), (97, 8, 40), (300, 16, 300)])
def test_insert_delete_reinsert_matches_brute_force(kind, R, L, W):
    rng = np.random.default_rng(R * 31 + L)
    index = make(kind, R, L)
    live: dict[int, tuple[int, int]] = {}
    next_id = 0
    for _ in range(4):
        ids, xs, ys = _random_intervals(rng, 120, R, W, next_id)
        next_id += 120
        index.insert(ids, xs, ys)
        live.update(zip(ids.tolist(), zip(xs.tolist(), ys.tolist(), strict=True), strict=True))
        _check(index, live, R)
        gone = rng.choice(sorted(live), size=min(len(live), 70), replace=False).tolist()
        assert index.delete(gone + [10**6]) == len(gone)
        for i in gone:
            del live[i]
        _check(index, live, R)
        # re-insert some deleted ids with new bounds
        back = np.array(gone[:30], dtype=np.int64)
        bx = rng.integers(0, R, len(back))
        by = np.minimum(R - 1, bx + rng.integers(0, W + 1, len(back)))
        index.insert(back, bx, by)
        live.update(zip(back.tolist(), zip(bx.tolist(), by.tolist(), strict=True), strict=True))
        _check(index, live, R)
    index.delete(list(live))
    live.clear()
    _check(index, live, R)
    assert index.count_many(np.arange(R)).sum() == 0


@settings(max_examples=40, deadline=None)
@given(
    scheme=st.sampled_from(ALL),
    logL=st.integers(0, 4),
    R=st.integers(1, 60),
    ops=st.lists(st.tuples(st.booleans(), st.integers(0, 15), st.integers(0, 59), st.integers(0, 59)),
                 max_size=40),
)
def test_hypothesis_sequences(scheme, logL, R, ops):
    index = IntervalIndex(R, 1 << logL, scheme)
    live: dict[int, tuple[int, int]] = {}
    for insert, i, a, b in ops:
        if insert and i not in live:
            x, y = sorted((a % R, b % R))
            index.insert([i], [x], [y])
            live[i] = (x, y)
        elif not insert:
            assert index.delete([i]) == (1 if i in live else 0)
            live.pop(i, None)
    _check(index, live, R)


def test_zero_length_and_whole_domain():
    for scheme in ALL:
        index = IntervalIndex(50, 8, scheme)
        index.insert([0, 1, 2], [0, 49, 0], [0, 49, 49])
        assert sorted(index.query(0).tolist()) == [0, 2]
        assert sorted(index.query(49).tolist()) == [1, 2]
        assert index.query(25).tolist() == [2]
        assert index.count(50) == 0 and index.count(-1) == 0


def test_rejects_bad_intervals_without_change():
    index = IntervalIndex(10, 4, "LCI-BV(DT)")
    index.insert([1], [2], [3])
    for ids, xs, ys in (([2], [5], [4]), ([2], [-1], [3]), ([2], [0], [10]), ([1], [0], [1]), ([3, 3], [0, 1], [1, 2])):
        with pytest.raises(ValueError):
            index.insert(ids, xs, ys)
    assert len(index) == 1 and index.query(2).tolist() == [1]
    with pytest.raises(ValueError):
        IntervalIndex(10, 6, "LCI")
    with pytest.raises(ValueError):
        IntervalIndex(10, 4, "XYZ")


def test_geometry_matches_the_paper():
    # covering segment sizes of Section 3 and distance tables of Section 4.1, half-open VCIs
    for L in (1, 2, 4, 16, 128):
        g = geometry("SCI-BV(DT)", 1000, L)
        assert g.segment == (L - 1) * L + 1
        assert len(distance_table(g)) == L * (L + 1) // 2
        k = L.bit_length() - 1
        g = geometry("LCI-BV(DT)", 1000, L)
        assert g.K == k + 1 and g.segment == (L - 1) * (k + 1) + 1
        dt = distance_table(g)
        assert len(dt) == sum(sum(1 for t in range(k + 1) if 2 ** t > d) for d in range(L))
        assert dt[0] >= 0 and dt[-1] == g.segment - 1 and (np.diff(dt) > 0).all()
        assert lengths(g).tolist() == [2 ** t for t in range(k + 1)]


def test_bitmap_sizes():
    assert bitmap_bytes("LCI-BV(DT)", 5000, 128) == 0
    assert bitmap_bytes("LCI-BC", 5000, 128) == 5000 * ((127 * 8 + 1 + 63) // 64) * 8
    assert bitmap_bytes("LCI", 5000, 128) == 5000 * (((5000 + 127) * 8 + 63) // 64) * 8
    index = IntervalIndex(5000, 128, "LCI-BC")
    assert index.memory_bytes() >= bitmap_bytes("LCI-BC", 5000, 128)

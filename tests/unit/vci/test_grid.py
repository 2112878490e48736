"""Real intervals on the grid: open, closed, half-infinite, zero-length, outside the domain."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matchers.vci.grid import GridIntervalIndex, choose_grid
from tests.unit.vci.naive import stab_values

INF = math.inf
ENDS = [-INF, INF, -50.0, -3.0, -2.5, -1e-300, 0.0, 0.1, 1.0, 1.5, 2.0, 3.0, 7.75, 40.0, 1e6, 1e300]
PROBES = ENDS[2:] + [-1e308, 1e308, -0.0, 0.05, 0.9999999999999999, 1.0000000000000002, 2.5, 41.0,
                     -51.0, 5e-324, -5e-324]


def _check(index: GridIntervalIndex, live: dict, probes) -> None:
    probes = np.asarray(probes, dtype=np.float64)
    offsets, ids = index.query_many(probes)
    counts = index.count_many(probes)
    for k, v in enumerate(probes.tolist()):
        expected = stab_values(live, v)
        assert sorted(ids[offsets[k]:offsets[k + 1]].tolist()) == expected, (v, index.exp, index.base)
        assert counts[k] == len(expected)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("scheme,L,max_units", [("LCI-BV(DT)", 8, 64), ("LCI-BC", 4, 8), ("SCI", 4, 1000),
                                                ("LCI-BV", 16, 3), ("SCI-BC", 2, 100)])
def test_sequences_match_brute_force(seed, scheme, L, max_units):
    rng = np.random.default_rng(seed)
    pool = ENDS if seed % 2 else [float(v) for v in range(-20, 21)] + [-INF, INF, 0.5, 10.25]
    index = GridIntervalIndex(scheme, L, max_units)
    live: dict[int, tuple] = {}
    free = list(range(400))
    for _ in range(5):
        n = 80
        ids = [free.pop(0) for _ in range(n)]
        lo = rng.choice(pool, n)
        hi = rng.choice(pool, n)
        swap = (lo > hi) & (rng.random(n) < 0.9)  # keep a few empty ones
        lo[swap], hi[swap] = hi[swap], lo[swap]
        lc = rng.random(n) < 0.5
        hc = rng.random(n) < 0.5
        index.insert(ids, lo, hi, lc, hc)
        live.update({i: (lo[k], hi[k], bool(lc[k]), bool(hc[k])) for k, i in enumerate(ids)})
        _check(index, live, PROBES + pool + rng.uniform(-60, 60, 30).tolist())
        gone = rng.choice(sorted(live), 40, replace=False).tolist()
        assert index.delete(gone + [9999]) == 40
        for i in gone:
            del live[i]
        free.extend(gone)
        _check(index, live, PROBES + pool)
    assert len(index) == len(live)
    assert index.memory_bytes() > 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(ENDS + [0.25, 2.125, -7.0]), st.sampled_from(ENDS + [0.25, 9.0]),
                          st.booleans(), st.booleans()), min_size=1, max_size=25),
       st.lists(st.floats(allow_nan=True, allow_infinity=False), max_size=20))
def test_hypothesis_intervals(intervals, probes):
    index = GridIntervalIndex("LCI-BV(DT)", 4, 16)
    live = {i: iv for i, iv in enumerate(intervals)}
    index.insert(list(live), [v[0] for v in intervals], [v[1] for v in intervals],
                 [v[2] for v in intervals], [v[3] for v in intervals])
    _check(index, live, PROBES + probes)
    index.delete(list(live)[::2])
    for i in list(live)[::2]:
        del live[i]
    _check(index, live, PROBES + probes)


def test_relayout_keeps_answers():
    index = GridIntervalIndex("LCI-BV(DT)", 8, 1 << 10)
    live = {}
    index.insert([0, 1], [0.0, 5.0], [10.0, 6.0])
    live.update({0: (0.0, 10.0, True, True), 1: (5.0, 6.0, True, True)})
    first = (index.exp, index.base, index.units)
    ids = list(range(2, 300))
    lo = [float(1000 + 3 * i) for i in ids]
    index.insert(ids, lo, [v + 0.5 for v in lo], True, False)
    live.update({i: (lo[k], lo[k] + 0.5, True, False) for k, i in enumerate(ids)})
    assert (index.exp, index.base, index.units) != first
    _check(index, live, PROBES + lo + [v + 0.25 for v in lo] + [v + 0.5 for v in lo])


def test_choose_grid():
    assert choose_grid(np.array([]), 100) == (0, 0, 64)
    exp, base, units = choose_grid(np.array([0.0, 100.0, 250.0]), 1000)
    assert exp <= 0 and all(float(v * 2.0 ** exp).is_integer() for v in (0.0, 100.0, 250.0))
    exp, base, units = choose_grid(np.array([0.125, 3.0]), 1000)
    assert exp == 3 and base == 1 and units == 24
    exp, base, units = choose_grid(np.array([0.1, 1e6]), 1000)
    assert units <= 1000


def test_rejects_nan_and_duplicates():
    index = GridIntervalIndex()
    with pytest.raises(ValueError):
        index.insert([0], [math.nan], [1.0])
    index.insert([0], [1.0], [2.0])
    with pytest.raises(ValueError):
        index.insert([0], [1.0], [2.0])
    with pytest.raises(ValueError):
        GridIntervalIndex("nope")
    assert index.query(math.nan).tolist() == []

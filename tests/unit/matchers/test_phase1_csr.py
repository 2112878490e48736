"""Phase 1's merge of its evaluators' pairs gives the CSR of the counting sort it replaces
(``pairs_to_csr`` of the parts concatenated), and says when a part is not ascending."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matchers.phase1.kernels import merge_grouped, pairs_to_csr


def _check(n_events: int, parts: list[tuple[list[int], list[int]]]) -> None:
    evs = tuple(np.array(sorted(ev), np.int32) for ev, _ in parts)
    pids = tuple(np.array(pid, np.int32) for _, pid in parts)
    expected = pairs_to_csr(n_events, np.concatenate(evs), np.concatenate(pids))
    got = merge_grouped(n_events, evs, pids, np.full(sum(map(len, pids)) + 3, -7, np.int32))
    assert got is not None
    assert got[0].tolist() == expected[0].tolist() and got[1].tolist() == expected[1].tolist()


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("n_parts", [1, 2, 3])
def test_merge_equals_the_counting_sort(seed, n_parts):
    rng = random.Random(seed)
    n_events = rng.choice([1, 5, 300])
    parts = []
    for _ in range(n_parts):
        size = rng.choice([0, 1, 50, 2000])
        parts.append(([rng.randrange(n_events) for _ in range(size)], [rng.randrange(10**6) for _ in range(size)]))
    _check(n_events, parts)


@settings(max_examples=200, deadline=None)
@given(n_events=st.integers(1, 20), data=st.data())
def test_merge_equals_the_counting_sort_for_any_parts(n_events, data):
    pair = st.tuples(st.integers(0, n_events - 1), st.integers(0, 1000))
    parts = [tuple(map(list, zip(*pairs, strict=True))) if pairs else ([], [])
             for pairs in data.draw(st.lists(st.lists(pair, max_size=30), min_size=1, max_size=4))]
    _check(n_events, parts)


def test_a_part_not_ascending_is_refused():
    evs = (np.array([0, 2, 1], np.int32), np.array([1], np.int32))
    pids = (np.array([5, 6, 7], np.int32), np.array([8], np.int32))
    assert merge_grouped(3, evs, pids, np.empty(4, np.int32)) is None


def test_parts_of_other_dtypes_and_strides_through_phase1():
    """``PredicateIndex.satisfied`` hands the kernel contiguous int32 parts whatever it is given."""
    from matchers.phase1 import PredicateIndex

    class Fixed:
        def __init__(self, ev: np.ndarray, pid: np.ndarray) -> None:
            self.pairs = ev, pid

        def satisfied(self, batch):  # noqa: ANN001, ANN202  # a stand-in evaluator
            return self.pairs

    index = PredicateIndex.__new__(PredicateIndex)
    index.evaluators = [Fixed(np.array([0, 0, 2, 2, 2, 2], np.int64)[::2], np.array([1, 2, 3], np.int64)),
                        Fixed(np.array([0, 1], np.int32), np.array([7, 8], np.int32))]

    class Batch:
        n = 3

    offsets, pids = index.satisfied(Batch())  # only n is read
    assert offsets.tolist() == [0, 2, 3, 5] and pids.tolist() == [1, 7, 8, 2, 3]
